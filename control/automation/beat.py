"""Celery beat as `specroute beat` runs it: Celery's `Beat` with a SIGTERM/SIGINT
handler that is safe in every phase of start-up.

NOTE: Celery's own handler (`celery.apps.beat.Beat.install_sync_handler`) calls
`service.sync()`, which reads `Service.scheduler`, a cached property first computed
by `Service.start()` right after it logs "beat: Starting...". A signal that lands
while that first computation runs (shelve open, module imports, schedule merge)
computes it again inside the handler: a second scheduler opens the same schedule
file while the first holds it open, and imports already under way in the
interrupted frame are seen half done. The errors that follow are taken for a
corrupted schedule (the file is removed and rebuilt) or escape as a traceback of
~70 KB; the first makes beat carry on as if never signalled, the second blocks a
parent that no longer reads the pipe. Either way beat did not stop.

This handler never creates the scheduler: while it is still being created it only
asks the service to stop, and `Service.start()` then finishes creating it, skips
its loop and closes it (schedule synced), exiting 0. Once the scheduler exists it
does what Celery's does: sync, close, raise SystemExit (which also ends a
`time.sleep` between ticks at once).
"""

from types import FrameType

from celery import platforms
from celery.apps.beat import Beat as CeleryBeat
from celery.beat import Service


class Beat(CeleryBeat):  # type: ignore[misc]
    def install_sync_handler(self, service: Service) -> None:
        def stop(signum: int, frame: FrameType | None) -> None:
            # `scheduler` is a cached property: in the instance's __dict__ only once
            # its first computation has returned.
            if "scheduler" not in vars(service):
                service.stop()
                return
            service.sync()
            raise SystemExit()

        platforms.signals.update(SIGTERM=stop, SIGINT=stop)
