//! Linking an incore object with the builtins into a single-`.text` image.

use std::ffi::OsString;
use std::path::Path;

use scene_util::Cancel;

use crate::error::{CompileError, Stage};
use crate::image::extract_text_image;
use crate::process::Invocation;
use crate::toolchain::Toolchain;

/// Links `objects` with the toolchain's link script into `out`.
///
/// Undefined symbols fail here (a `-pie` executable may not have any), which
/// is how "no calls outside the image" is enforced.
pub(crate) fn link_incore(
    tc: &Toolchain,
    script: &Path,
    objects: &[&Path],
    out: &Path,
    cwd: &Path,
    cancel: &Cancel,
) -> Result<(), CompileError> {
    Invocation {
        role: "linker",
        stage: Stage::Link,
        program: &tc.linker,
        args: link_args(tc, script, objects, out),
        cwd,
    }
    .run(cancel)
}

/// The linker arguments of [`link_incore`]; shared with
/// [`crate::outline::render_commands`] so rendered commands cannot drift.
pub(crate) fn link_args(
    tc: &Toolchain,
    script: &Path,
    objects: &[&Path],
    out: &Path,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = tc.link_flags.iter().map(OsString::from).collect();
    if tc.extraction == crate::toolchain::Extraction::Elf {
        args.push("-T".into());
        args.push(script.as_os_str().to_owned());
    }
    args.push("-o".into());
    args.push(out.as_os_str().to_owned());
    args.extend(objects.iter().map(|o| o.as_os_str().to_owned()));
    args
}

/// Checks a compiled incore object against the kernel image rules
/// ([`crate::image::check_object`]) before it is linked.
pub(crate) fn check_object(path: &Path, kernel: &str) -> Result<(), CompileError> {
    let bytes = std::fs::read(path).map_err(|source| CompileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(crate::image::check_object(&bytes, kernel)?)
}

/// Reads a linked kernel and extracts its validated text image.
pub(crate) fn read_image(path: &Path, kernel: &str) -> Result<Vec<u8>, CompileError> {
    let bytes = std::fs::read(path).map_err(|source| CompileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(extract_text_image(&bytes, kernel)?)
}
