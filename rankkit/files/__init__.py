"""rankkit's one file layer: every reader and writer of the package goes through it.

* :mod:`~rankkit.files.reading`: strict UTF-8 lines, gzip by content, one-line ``FILE:LINE`` errors;
* :mod:`~rankkit.files.writing`: atomic text outputs (temporary + rename; streams written through);
* :mod:`~rankkit.files.temporaries`: locked, marked temporaries and folders (``staging_dir``), and the
  removal of those a killed run left;
* :mod:`~rankkit.files.checks`: output checks made before any work;
* :mod:`~rankkit.files.paths`: path types, stream detection, the cache root.
"""

from rankkit.files.checks import check_output, check_output_dir, check_outputs
from rankkit.files.paths import PathLike, first_existing, is_gzip, is_stream, user_cache_root
from rankkit.files.reading import (
    GZIP_MAGIC, UTF8_BOM, decode_line, is_gzip_file, iter_lines, iter_raw_lines, open_binary, open_text, parse_json_object,
)
from rankkit.files.temporaries import TEMP_MARK, remove_stale_temporaries, remove_tree, staging_dir, temporary_path
from rankkit.files.writing import atomic_write

__all__ = [
    "GZIP_MAGIC", "PathLike", "UTF8_BOM", "TEMP_MARK", "atomic_write", "check_output", "check_output_dir", "check_outputs",
    "decode_line", "first_existing", "is_gzip", "is_gzip_file", "is_stream", "iter_lines", "iter_raw_lines",
    "open_binary", "open_text", "parse_json_object", "remove_stale_temporaries", "remove_tree", "staging_dir",
    "temporary_path", "user_cache_root",
]
