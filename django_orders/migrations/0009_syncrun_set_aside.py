from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_orders", "0010_order_cancel_permission"),
    ]

    operations = [
        migrations.AddField(
            model_name="syncrun",
            name="skipped",
            field=models.PositiveIntegerField(
                default=0,
                help_text="Records the database refused; the walk went on without them.",
                verbose_name="set aside",
            ),
        ),
        migrations.AddField(
            model_name="syncrun",
            name="problems",
            field=models.TextField(
                blank=True,
                help_text="Why each record set aside was refused.",
                verbose_name="problems",
            ),
        ),
    ]
