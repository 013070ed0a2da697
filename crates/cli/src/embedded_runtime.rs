//! The simulator runtime inside the `scene` binary: `build.rs` embeds the
//! release build of `scene-sim-runtime`, and a run that needs a card and
//! names no runtime unpacks it into the cache on first use
//! (`scene_device::EmbeddedRuntime`). So an installed `scene` needs no file
//! beside it.

use scene_device::EmbeddedRuntime;

/// The runtime this binary was built with.
pub const SIM_RUNTIME: EmbeddedRuntime = EmbeddedRuntime {
    bytes: include_bytes!(env!("SCENE_EMBEDDED_RUNTIME")),
    blake3_hex: env!("SCENE_EMBEDDED_RUNTIME_BLAKE3"),
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded bytes are a shared library of this platform that
    /// unpacks and loads: the same check `dlopen` will make.
    #[test]
    fn the_embedded_runtime_is_a_loadable_library() {
        let magic_ok = SIM_RUNTIME.bytes.starts_with(b"\x7fELF")
            || SIM_RUNTIME.bytes.starts_with(&[0xcf, 0xfa, 0xed, 0xfe]);
        assert!(magic_ok, "not an ELF or Mach-O file");
        let cache = tempfile::tempdir().expect("tempdir");
        let path = SIM_RUNTIME.unpack(cache.path()).expect("unpacks");
        assert_eq!(
            std::fs::read(&path).expect("readable").len(),
            SIM_RUNTIME.bytes.len()
        );
    }
}
