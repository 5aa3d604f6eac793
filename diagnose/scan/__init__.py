"""Static source scan: find every suspect's site (file:line) without executing the submission."""
from diagnose.scan.model import ScanResult
from diagnose.scan.scanner import scan_source

__all__ = ["ScanResult", "scan_source"]
