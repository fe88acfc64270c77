"""First-fit allocator of byte ranges inside one region (pure logic, no memory touched).

Ranges are rounded up to `align` bytes (the page size: a user lease gets its own mapping of its
range, which must start on a page). Free ranges are kept sorted by offset and merged with their
neighbours on free, so the region does not fragment into pieces smaller than what was freed.
The regions are small in number of live ranges (staging and engine leases), so the linear
first-fit scan is cheaper than keeping size-indexed bins; the TypeScript client uses the master's
O(1) bin allocator because it carves every Get of a busy process.
"""
import bisect
from typing import Dict, List, Optional


class RangeAllocator:
    def __init__(self, size: int, align: int = 4096):
        if size <= 0 or align <= 0 or size % align != 0:
            raise ValueError(f"RangeAllocator: size {size} must be a positive multiple of align {align}")
        self.size = size
        self.align = align
        self._starts: List[int] = [0]  # free ranges, sorted by offset
        self._lengths: Dict[int, int] = {0: size}
        self._used: Dict[int, int] = {}
        self.free_bytes = size

    def rounded(self, size: int) -> int:
        return (size + self.align - 1) // self.align * self.align

    def allocate(self, size: int) -> Optional[int]:
        """Offset of a free range of at least `size` bytes, or None when none is large enough."""
        need = self.rounded(size)
        if need <= 0 or need > self.free_bytes:
            return None
        for i, start in enumerate(self._starts):
            length = self._lengths[start]
            if length < need:
                continue
            del self._lengths[start]
            if length == need:
                del self._starts[i]
            else:
                self._starts[i] = start + need
                self._lengths[start + need] = length - need
            self._used[start] = need
            self.free_bytes -= need
            return start
        return None

    def free(self, offset: int) -> None:
        """Returns the range allocated at `offset`. Raises KeyError for an offset not allocated."""
        length = self._used.pop(offset)
        self.free_bytes += length
        i = bisect.bisect_left(self._starts, offset)
        end = offset + length
        # merge with the next free range
        if i < len(self._starts) and self._starts[i] == end:
            length += self._lengths.pop(end)
            del self._starts[i]
        # merge with the previous free range
        if i > 0:
            prev = self._starts[i - 1]
            if prev + self._lengths[prev] == offset:
                self._lengths[prev] += length
                return
        self._starts.insert(i, offset)
        self._lengths[offset] = length

    def allocated(self) -> int:
        """Ranges allocated now."""
        return len(self._used)
