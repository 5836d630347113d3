"""The tiered cache engine: an index, tiers with quotas and watermarks, fills from the UFS, readers.

Design: the unit of caching is a file, filled block by block (4 MiB) so a reader of a huge
file need not wait for all of it; a small file is one block. A completely cached file is a
plain file under ``<tier>/files/<dataset path>``, so "data already cached" can be read by its
local path; a file still being filled lives under ``<tier>/partial/``. Every block has a
CRC32C in the index. Readers hold a shared ``flock`` on the files they have open and the
evictor only takes what it can lock exclusively, so eviction never pulls data from under a reader.
"""

from millpond.datasets.cache.engine import DatasetCache, open_cache

__all__ = ["DatasetCache", "open_cache"]
