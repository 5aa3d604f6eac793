"""Static source scan: find every suspect's site (file:line) without executing the submission."""
from diagnose.scan.scanner import ScanResult, scan_source

__all__ = ["ScanResult", "scan_source"]
