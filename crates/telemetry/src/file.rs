//! The `file` exporter: the seed's telemetry messages as JSON lines, one file per
//! session (`<folder>/<session>.jsonl`, appended to when a session resumes).
//!
//! For offline use and debugging. Lines are buffered and written out on the
//! worker's tick and at the end; a write error is counted, never fatal.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use agentfile_wire::events::Event;

use super::message::Converter;
use super::{Exporter, RunInfo, Settings, Shared, StartError};

/// Where the files go when `telemetry.path` is unset.
pub fn default_folder(workspace: &Path) -> PathBuf {
    workspace.join(".agentfile").join("telemetry")
}

/// The file a session's messages go to.
pub fn session_file(folder: &Path, session_id: &str) -> PathBuf {
    folder.join(format!("{session_id}.jsonl"))
}

pub(crate) struct FileExporter {
    out: BufWriter<File>,
    path: PathBuf,
    convert: Converter,
    shared: Arc<Shared>,
    /// Lines written to the buffer but not yet to the file.
    pending: u64,
}

impl FileExporter {
    pub(crate) fn new(
        settings: &Settings,
        info: &RunInfo,
        shared: Arc<Shared>,
    ) -> Result<FileExporter, StartError> {
        let folder = settings
            .path
            .clone()
            .unwrap_or_else(|| default_folder(&info.workspace));
        std::fs::create_dir_all(&folder).map_err(|source| StartError::Io {
            what: "create",
            path: folder.clone(),
            source,
        })?;
        let path = session_file(&folder, &info.session_id);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|source| StartError::Io {
                what: "open",
                path: path.clone(),
                source,
            })?;
        Ok(FileExporter {
            out: BufWriter::new(file),
            path,
            convert: Converter::new(info, settings.capture_content),
            shared,
            pending: 0,
        })
    }

    fn flush(&mut self) {
        if self.pending == 0 {
            return;
        }
        match self.out.flush() {
            Ok(()) => {
                self.shared
                    .delivered
                    .fetch_add(self.pending, Ordering::Relaxed);
            }
            Err(e) => self
                .shared
                .failed(format!("writing {}: {e}", self.path.display())),
        }
        self.pending = 0;
    }
}

impl Exporter for FileExporter {
    fn export(&mut self, event: &Event) {
        let message = self.convert.message(event);
        self.shared.produced.fetch_add(1, Ordering::Relaxed);
        let written = serde_json::to_writer(&mut self.out, &message)
            .map_err(|e| e.to_string())
            .and_then(|()| self.out.write_all(b"\n").map_err(|e| e.to_string()));
        match written {
            Ok(()) => self.pending += 1,
            Err(e) => self
                .shared
                .failed(format!("writing {}: {e}", self.path.display())),
        }
    }

    fn tick(&mut self) {
        self.flush();
    }

    fn finish(&mut self, _deadline: Instant) {
        self.flush();
    }
}
