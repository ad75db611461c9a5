"""Order creation and checkout: persist the idempotency key, send, record, recover."""
