"""``OrderRequest.first_sent_at``: KEY_LIFETIME counts from the first attempt that may have
reached the service, not from the row's creation (a request that never reached it never expires).

Existing rows: one never attempted stays empty; one attempted gets ``created_at``, a lower bound
of its first send (we cannot tell now whether that attempt reached the service), so a key that
may be known upstream expires no later than it did before.

Chained after 0003 (already in the tree) rather than 0002, so the graph keeps a single leaf.
"""

from django.db import migrations, models
from django.db.models import F


def backfill(apps, schema_editor):
    OrderRequest = apps.get_model("django_orders", "OrderRequest")
    OrderRequest.objects.using(schema_editor.connection.alias).filter(attempts__gt=0).update(
        first_sent_at=F("created_at")
    )


class Migration(migrations.Migration):
    dependencies = [("django_orders", "0003_drop_like_indexes")]

    operations = [
        migrations.AddField(
            model_name="orderrequest",
            name="first_sent_at",
            field=models.DateTimeField(
                blank=True,
                help_text=(
                    "The first attempt that may have reached the service; KEY_LIFETIME counts "
                    "from it. Empty while no attempt can have reached it, so a resend is always "
                    "safe."
                ),
                null=True,
                verbose_name="first sent",
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
