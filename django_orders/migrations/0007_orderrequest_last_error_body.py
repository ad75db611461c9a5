"""``OrderRequest.last_error_body``: the service's whole error object of the last attempt
(``type``, ``code``, ``message``, ``detail``, ``url``, ``fix_code``, ``cause``...), so staff can
read its ``detail`` and follow its documentation link in the admin.

Existing rows get ``{}``: the bodies of earlier attempts were not kept.

Depends on 0006, the latest migration in ``main`` when this was merged.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_orders", "0006_order_checkout_fields"),
    ]

    operations = [
        migrations.AddField(
            model_name="orderrequest",
            name="last_error_body",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text=(
                    "The service's error object of the last attempt, every field as sent "
                    "(type, code, message, detail, url, fix_code, cause...); empty when it "
                    "sent none."
                ),
                verbose_name="last error body",
            ),
        ),
    ]
