"""Every family of a segment directory, merged over its writer processes:
``python3 read_directory.py [DIR]`` (default: perfabi.default_dir())."""

import sys

import perfabi

with perfabi.Directory(sys.argv[1] if len(sys.argv) > 1 else None) as d:
    read = d.read()
for fam in read.families:
    for v in fam.values:
        print(fam.family.name, v.instance.name, dict(v.instance.labels), v.total)
for p in read.problems:  # a bad file or a conflicting family, alone
    print("left out:", p.message, file=sys.stderr)
