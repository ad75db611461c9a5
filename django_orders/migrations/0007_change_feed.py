import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_orders", "0006_refund_api_keys"),
    ]

    operations = [
        migrations.CreateModel(
            name="SyncCheckpoint",
            fields=[
                (
                    "resource",
                    models.CharField(
                        max_length=64, primary_key=True, serialize=False, verbose_name="resource"
                    ),
                ),
                ("cursor", models.TextField(blank=True, verbose_name="cursor")),
                ("done", models.PositiveIntegerField(default=0, verbose_name="results read")),
                ("looked_up", models.PositiveIntegerField(default=0, verbose_name="looked up")),
                (
                    "watermark",
                    models.DateTimeField(blank=True, null=True, verbose_name="watermark to leave"),
                ),
                (
                    "index_freshness",
                    models.CharField(blank=True, max_length=16, verbose_name="search index"),
                ),
                (
                    "total",
                    models.PositiveIntegerField(
                        blank=True, null=True, verbose_name="service's count"
                    ),
                ),
                (
                    "total_exact",
                    models.BooleanField(blank=True, null=True, verbose_name="exact count"),
                ),
                (
                    "started_at",
                    models.DateTimeField(default=django.utils.timezone.now, verbose_name="started"),
                ),
            ],
            options={
                "verbose_name": "backfill checkpoint",
                "verbose_name_plural": "backfill checkpoints",
            },
        ),
        migrations.AddField(
            model_name="order",
            name="search_updated_at",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="The provider's updated_at of the last change the change feed settled.",
                null=True,
                verbose_name="search updated",
            ),
        ),
        migrations.AddField(
            model_name="syncrun",
            name="feed_lookups",
            field=models.PositiveIntegerField(default=0, verbose_name="looked up for the feed"),
        ),
        migrations.AddField(
            model_name="syncrun",
            name="feed_read",
            field=models.PositiveIntegerField(default=0, verbose_name="changes read"),
        ),
        migrations.AddField(
            model_name="syncrun",
            name="index_freshness",
            field=models.CharField(
                blank=True,
                help_text="How fresh the provider's search index said it was: current, delayed...",
                max_length=16,
                verbose_name="search index",
            ),
        ),
        migrations.AddField(
            model_name="syncrun",
            name="mirror_total",
            field=models.PositiveIntegerField(blank=True, null=True, verbose_name="mirror's count"),
        ),
        migrations.AddField(
            model_name="syncrun",
            name="service_total",
            field=models.PositiveIntegerField(
                blank=True, null=True, verbose_name="service's count"
            ),
        ),
        migrations.AddField(
            model_name="syncrun",
            name="service_total_exact",
            field=models.BooleanField(
                blank=True,
                help_text="False: the count is a lower bound.",
                null=True,
                verbose_name="exact count",
            ),
        ),
        migrations.AddField(
            model_name="syncrun",
            name="warning",
            field=models.TextField(
                blank=True,
                help_text="What the run could not trust (a stale index).",
                verbose_name="warning",
            ),
        ),
        migrations.AddField(
            model_name="syncrun",
            name="watermark_after",
            field=models.DateTimeField(
                blank=True,
                help_text="The next run's change feed reads back to here (less the overlap).",
                null=True,
                verbose_name="watermark after",
            ),
        ),
        migrations.AddField(
            model_name="syncrun",
            name="watermark_before",
            field=models.DateTimeField(blank=True, null=True, verbose_name="watermark before"),
        ),
    ]
