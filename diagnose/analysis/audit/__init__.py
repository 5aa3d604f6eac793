"""The claims a report makes, and the audit that checks them against the session's own raw runs.

Takes a concluded Session (and everything of the analysis beneath it: verdict/, effects/, causes/); gives the
typed Claims the renderers print (claims.py), and the audit's findings: every statement its runs cannot support
(audit.py, with its rules in audit_effects.py, audit_negative.py, audit_parts.py, audit_probes.py and
audit_runs.py). The top of the analysis: no other analysis subpackage imports it.
"""
