"""DummyClient's calls that adopt memory the process owns as shared regions in place (an engine's
KV pool, which the engine allocated itself and cannot move): see adopted_memory.py. A mixin of
DummyClient, kept apart so dummy_client.py stays one concept."""
import logging
from typing import List, Optional

from ._proto import store_client_pb2 as pb
from .adopted_memory import AdoptedMemory
from .errors import InvalidParamsError, StoreError, UnavailableError
from .protocol import METHODS
from .values import as_buffer

log = logging.getLogger("kvcache_store")


class AdoptCalls:
    _adopted: List[AdoptedMemory]

    def adopt_memory(self, buffer_ptr, size: Optional[int] = None) -> AdoptedMemory:
        """Moves memory this process allocated itself (an engine's KV pool) into a shared region
        in place: the page-aligned interior of [ptr, ptr+size) is remapped onto a region file
        with its bytes and addresses kept (adopted_memory.py), so puts from it and gets into it
        copy nothing; the partial head and tail pages stay private and are staged on use (one
        memmove). Call it before the memory is in use, on memory that outlives the adoption
        (or release it first); never on memory pinned for a GPU. Returns an AdoptedMemory
        (`start`, `end`, `shared_bytes`, `head`, `tail`, `covers()`, `remap()` to fence late
        transfers after a deadline miss, `release()`, `summary()`). Raises InvalidParamsError
        for a range without a whole page or one overlapping a region already known,
        UnavailableError when the file cannot be made."""
        if self._closed or self._pool is None:
            raise UnavailableError("DummyClient: closed" if self._closed else "DummyClient: not set up (call setup() first)")
        b = as_buffer(buffer_ptr, size, writable=True, what="adopt_memory")
        if b.address is None:
            raise InvalidParamsError("adopt_memory: the memory must be writable and addressable (a pointer, tensor, numpy array or mmap), not a bytes object")
        end = b.address + b.size
        if any(r.address < end and b.address < r.address + r.size for r in self._regions):
            raise InvalidParamsError(f"adopt_memory: [0x{b.address:x}, +{b.size}) overlaps a shared region already known")
        mem = AdoptedMemory(self.endpoint.shm_dir, b.address, b.size, self._attach_adopted, self._detach_adopted)
        self._adopted.append(mem)
        log.info("kvcache_store: adopted %d bytes at 0x%x (%d head and %d tail bytes staged)", mem.shared_bytes, mem.start, mem.head, mem.tail)
        return mem

    def release_adopted(self, buffer_ptr: int) -> int:
        """Ends the adoption holding `buffer_ptr` (AdoptedMemory.release): the real client unmaps
        the file, which is deleted; the memory stays where it is, with its bytes. 0, or
        INVALID_PARAMS when no adopted range holds the address."""
        mem = next((m for m in self._adopted if m.region is not None and m.covers(int(buffer_ptr), 1)), None)
        if mem is None:
            return self._code(InvalidParamsError(f"release_adopted: no adopted range holds 0x{int(buffer_ptr):x}"))
        mem.release()
        self._adopted.remove(mem)
        return 0

    def _attach_adopted(self, region) -> None:
        self._regions.append(region)
        self._pool.add_region(region)

    def _detach_adopted(self, region) -> None:
        """Forgets an adopted region without waiting: the real client may still be using it (a
        call that missed its deadline); it unmaps it when those calls end."""
        self._pool.remove_region(region)
        if region in self._regions:
            self._regions.remove(region)
        c = self._conn
        rid = c.ids.pop(region.name, None) if c is not None else None
        if rid is not None and not c.channel.closed:
            m = METHODS["UnregisterRegion"]
            try:
                c.channel.call_nowait(m.name, m.index, pb.UnregisterRegionRequest(region_id=rid).SerializeToString(), timeout=1.0)
            except StoreError:
                pass  # the connection went: the real client released it then
        region.close()
