"""What each toggle changed in its run, measured against the baseline's: the evidence that a variant ran "without
the suspect", never assumed from the toggle's label.

Takes a Session and a variant's run (and verdict/ for the comparison with the baseline); gives each toggle's
Effect (effects.py, with its measures in effect_lines.py and effect_calls.py, the record in effect_record.py),
what one edit of a loop's count took away besides the count (effect_parts.py), and what a toggle that still
failed took away in numbers (partly.py). Imports only verdict/ of the other analysis subpackages.
"""
