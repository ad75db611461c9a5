from django import forms


class CheckoutForm(forms.Form):
    name = forms.CharField(max_length=255)
    email_address = forms.EmailField(label="Email")
    phone_number = forms.CharField(
        max_length=16, help_text="International format, e.g. +233201234567"
    )
    finalize = forms.BooleanField(
        required=False,
        initial=True,
        label="Seal the order and get a payment link",
        help_text="Shown to staff only: unticked, the order stays preparing (create_order's "
        "finalize=False), to try the admin on an unsealed order.",
    )

    def __init__(self, *args, developer: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not developer:  # a shopper always gets a sealed order and its payment page
            del self.fields["finalize"]

    @property
    def sealed(self) -> bool:
        return self.cleaned_data.get("finalize", True)
