"""appschedule-operator: an app's scheduled tasks as CronJobs, every run keyed, missed and doubled runs seen."""

__version__ = "0.1.0"
