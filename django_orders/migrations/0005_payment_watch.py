import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_orders', '0004_refund_order_permission'),
    ]

    operations = [
        migrations.CreateModel(
            name='PaymentWatch',
            fields=[
                ('order', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='payment_watch', serialize=False, to='django_orders.order', verbose_name='order')),
                ('started_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='started')),
                ('lookups', models.PositiveSmallIntegerField(default=0, verbose_name='lookups')),
                ('claimed_until', models.DateTimeField(blank=True, help_text='A worker looking the order up holds the watch until then.', null=True, verbose_name='claimed until')),
                ('next_lookup_at', models.DateTimeField(blank=True, null=True, verbose_name='next lookup')),
                ('finished_at', models.DateTimeField(blank=True, null=True, verbose_name='finished')),
                ('end_reason', models.CharField(blank=True, max_length=32, verbose_name='ended by')),
            ],
            options={
                'verbose_name': 'payment watch',
                'verbose_name_plural': 'payment watches',
            },
        ),
    ]
