"""Django's Tasks framework: ``django.tasks`` on Django 6.0+, the ``django-tasks`` backport on
5.2 (``pip install "django-orders[tasks]"``). Whichever exists is imported, core first."""

from __future__ import annotations

from importlib.util import find_spec
from typing import TYPE_CHECKING

if TYPE_CHECKING or find_spec("django.tasks") is not None:
    # The type checker reads Django's own (django-stubs has them), whatever is installed.
    from django.tasks import TaskResult, default_task_backend, task, task_backends
else:
    from django_tasks import TaskResult, default_task_backend, task, task_backends

__all__ = ["TaskResult", "default_task_backend", "task", "task_backends"]
