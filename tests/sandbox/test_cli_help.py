"""``python -m django_orders.testing.sandbox --help`` tells a newcomer what the program is for."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT


def test_help_describes_the_sandbox_not_its_module():
    shown = subprocess.run(
        [sys.executable, "-m", "django_orders.testing.sandbox", "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    text = " ".join(shown.split())
    assert text.startswith("usage: python -m django_orders.testing.sandbox ")
    assert "Serve a local stand-in of the hosted order service over HTTP" in text
    assert "Command line:" not in text and "``" not in text
    assert "--port PORT Port to listen on, 0 = any free (default: 8765)." in text
