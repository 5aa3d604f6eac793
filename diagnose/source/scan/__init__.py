"""Static source scan: find every suspect's site (file:line) without executing the submission."""
from diagnose.source.scan.model import ScanResult
from diagnose.source.scan.scanner import scan_source

__all__ = ["ScanResult", "scan_source"]
