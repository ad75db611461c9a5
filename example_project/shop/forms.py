from django import forms


class CheckoutForm(forms.Form):
    name = forms.CharField(max_length=255)
    email_address = forms.EmailField(label="Email")
    phone_number = forms.CharField(
        max_length=16, help_text="International format, e.g. +233201234567"
    )
    finalize = forms.BooleanField(
        required=False, initial=True, label="Seal the order and get a payment link"
    )
