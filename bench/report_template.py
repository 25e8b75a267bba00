"""The reports' prose: the template beside a generator (GENERATOR.md.in), in blocks: the text after
"@@ name" and a space (or a newline) up to the next "@@ " line, its last newline left out, with
${name} values that the generator's figures fill in."""
import os
import re
import string


def filler(generator):
    """fill(block, **values) over the template beside the file `generator`."""
    with open(os.path.splitext(os.path.abspath(generator))[0] + ".md.in", encoding="utf-8") as f:
        parts = re.split(r"^@@ ([\w.]+)[ \n]", f.read(), flags=re.M)[1:]
    blocks = {name: body[:-1] for name, body in zip(parts[::2], parts[1::2])}
    return lambda block, /, **values: string.Template(blocks[block]).substitute(values)
