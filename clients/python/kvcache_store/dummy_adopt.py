"""DummyClient's calls that adopt memory the process owns as shared regions in place (an engine's
KV host pool, which the engine allocated itself and cannot move): see adopted_region.py. A mixin
of DummyClient, kept apart so dummy_client.py stays one concept."""
import logging
from typing import Optional

from .adopted_region import AdoptedRegion, aligned_interior
from .errors import InvalidParamsError, UnavailableError
from .values import as_buffer

log = logging.getLogger("kvcache_store")


class AdoptCalls:
    def adopt_memory(self, buffer_ptr, size: Optional[int] = None) -> dict:
        """Moves memory this process owns (an engine's KV pool) into a shared region in place:
        its page-aligned interior is remapped onto a region file (adopted_region.py), keeping its
        address and bytes, so puts from it and gets into it copy nothing in either process. The
        partial pages at an unaligned head or tail stay private: buffers there are staged (one
        memmove). Call it before the memory is in use, on memory that outlives the client (or
        call release_adopted first); never on memory pinned for a GPU. Returns {"address",
        "size", "head", "tail"}: the adopted range and the bytes left out before and after it
        (size 0: no whole page, nothing adopted). Raises InvalidParamsError when the range
        overlaps a region already known, UnavailableError when the file cannot be made."""
        if self._closed or self._pool is None:
            raise UnavailableError("DummyClient: closed" if self._closed else "DummyClient: not set up (call setup() first)")
        b = as_buffer(buffer_ptr, size, writable=True, what="adopt_memory")
        if b.address is None:
            raise InvalidParamsError("adopt_memory: needs memory with a fixed address (a pointer, tensor, numpy array or mmap), not a bytes object")
        start, length = aligned_interior(b.address, b.size)
        out = {"address": start, "size": length, "head": start - b.address if length else b.size, "tail": b.address + b.size - start - length if length else 0}
        if not length:
            return out
        if any(r.address < start + length and start < r.address + r.size for r in self._regions):
            raise InvalidParamsError(f"adopt_memory: [0x{start:x}, +{length}) overlaps a shared region already known")
        region = AdoptedRegion(self.endpoint.shm_dir, start, length)
        self._regions.append(region)
        self._pool.add_region(region)
        log.info("kvcache_store: adopted %d bytes at 0x%x as %s (%d head and %d tail bytes staged)", length, start, region.name, out["head"], out["tail"])
        return out

    def release_adopted(self, buffer_ptr: int) -> int:
        """Ends an adoption (`buffer_ptr` inside the adopted range): the real client unmaps the
        file, which is deleted; the memory stays where it is, with its bytes. 0, or
        INVALID_PARAMS when no adopted range holds the address."""
        region = next((r for r in self._regions if getattr(r, "adopted", False) and r.contains(int(buffer_ptr), 1)), None)
        if region is None:
            return self._code(InvalidParamsError(f"release_adopted: no adopted range holds 0x{int(buffer_ptr):x}"))
        self._pool.remove_region(region)
        self._drop_region(region)
        return 0
