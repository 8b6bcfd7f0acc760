"""Spider 2.0-DBT as an audit target: its instances, read from a local checkout, played in our environment.

``checkout`` reads a checkout (the benchmark's own, or one ``harvest export spider2`` wrote), ``split`` is the
committed dev/sealed split, ``tasks`` turns instances into environment tasks (workspace and grading), and
``sealed`` holds a frozen recipe to one audit of the sealed part.
"""
