"""Training-health monitor: alert rules over TRL's logged metrics and the dashboard line (pure Python)."""

from align_kit.monitor.dashboard import dashboard_line
from align_kit.monitor.rules import RULES, Alert, HealthMonitor
from align_kit.monitor.settings import HealthMonitorConfig

__all__ = ["RULES", "Alert", "HealthMonitor", "HealthMonitorConfig", "dashboard_line"]
