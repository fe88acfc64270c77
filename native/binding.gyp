# node-gyp build of the native data path: memory mappings, the TCP transfer engine and CRC-32C.
{
  "targets": [
    {
      "target_name": "kvstore_native",
      "sources": [
        "src/addon.cc",
        "src/addon_file_lock.cc",
        "src/addon_memory.cc",
        "src/addon_engine.cc",
        "src/addon_bench.cc",
        "src/mapping.cc",
        "src/populate.cc",
        "src/memory_memfd.cc",
        "src/memory_shm.cc",
        "src/memory_file.cc",
        "src/mmap_arena.cc",
        "src/result_arena.cc",
        "src/addon_result_arena.cc",
        "src/region_table.cc",
        "src/fence_page.cc",
        "src/incarnation.cc",
        "src/auth_proof.cc",
        "src/auth_handshake.cc",
        "src/connection_gate.cc",
        "src/connection_listener.cc",
        "src/tcp_server.cc",
        "src/tcp_peer.cc",
        "src/tcp_engine.cc",
        "src/op_checksums.cc",
        "src/socket_io.cc",
        "src/raw_pump.cc",
        "src/shareable_registry.cc",
        "src/shm_server.cc",
        "src/peer_credentials.cc",
        "src/addon_peer_credentials.cc",
        "src/shm_peer.cc",
        "src/crc32c.cc",
        "src/crc32c_portable.cc",
        "src/crc32c_sse42.cc",
        "src/crc32c_avx512.cc",
        "src/crc32c_arm64.cc",
        "src/checksum_bench.cc",
        "src/addon_checksum.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NODE_ADDON_API_DISABLE_CPP_EXCEPTIONS", "NAPI_VERSION=8"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-O2", "-fexceptions", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "libraries": ["-lpthread"]
    }
  ]
}
