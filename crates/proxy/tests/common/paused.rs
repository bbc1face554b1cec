//! A node process stopped with SIGSTOP for the length of a test step, continued when the
//! guard drops (even on a panic), so a failing test never leaves a frozen redis-server.

/// The process `pid`, stopped until this is dropped.
pub struct Paused(String);

impl Paused {
    pub fn stop(pid: u32) -> Paused {
        let paused = Paused(pid.to_string());
        paused.signal("-STOP");
        paused
    }

    fn signal(&self, sig: &str) {
        let status = std::process::Command::new("kill")
            .args([sig, &self.0])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        self.signal("-CONT");
    }
}
