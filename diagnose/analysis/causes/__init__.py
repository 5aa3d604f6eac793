"""The causes: which suspects made the submission fail, which are cleared, and the fix.

Takes a Session (with verdict/ and effects/ beneath it); gives ranked causes, interactions found by delta
debugging (bisector.py, ddmin.py, cause_story.py), the suspects verified not to be the cause (clearing.py), the
verified fix and the runs still owed a solo confirmation (fix_choice.py), the cause where no toggle fixes it
(unfixed.py), and what a session that ran no probe can say (not_looked.py). bisector.conclude fills the session's
causes, cleared, inconclusive and fix; minimal_set records its search. Imports nothing of audit/.
"""
