"""The automation's Celery app with its tasks registered: what workers, beat and senders use."""

from control.automation.celery_app import AutomationCelery, configure
from control.automation.tasks import register_tasks
from control.settings import ControlSettings


def create_celery_app(
    settings: ControlSettings, *, queue: str = "specroute-automation"
) -> AutomationCelery:
    app = AutomationCelery(
        settings,
        broker=settings.resolved_broker_url(),
        backend=settings.resolved_result_backend(),
    )
    configure(app, settings, queue)
    register_tasks(app)
    return app
