"""Import a MirrorMaker 2 configuration (`mm2.properties`) as a treedist deployment.

A pure core, no I/O (the CLI reads and writes the files): `properties` parses Java's
.properties format, `clients` maps Java client settings to librdkafka's, `tree` proposes a
tree for the enabled flows, `mapping` puts it together into a deployment mapping and the one
report of what has no equivalent. Runs in the CLI process.
"""

from treedist.mm2import.errors import Mm2ImportError
from treedist.mm2import.mapping import Imported, import_mm2
from treedist.mm2import.properties import dump_properties, parse_properties

__all__ = ["Mm2ImportError", "Imported", "import_mm2", "parse_properties", "dump_properties"]
