"""The command line: ``speclab`` and what runs before and around the lessons.

The argument parser (``main``), the gate that refuses a bad command line before vLLM or torch is
imported (``gate``), the commands (``commands``), the lessons' papermill parameters read and
checked once (``parameters``), and the main job that runs the notebook series (``runner``).
"""
