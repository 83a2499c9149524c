//! `--serve ADDR:PORT` of `record` and `top`: Prometheus/OpenMetrics metrics of every I/O
//! recorded ([`iodump_record::metrics`]), rendered for the endpoint's thread
//! ([`iodump_record::serve`]) when a scrape asks; a live sink of its own, or beside `top`'s
//! view.

use std::time::{Duration, Instant};

use anyhow::Context;
use iodump_format::Event;
use iodump_record::abi::IoEvent;
use iodump_record::cgroups::Resolver;
use iodump_record::convert::Converter;
use iodump_record::in_flight::InFlightLook;
use iodump_record::metrics::Metrics;
use iodump_record::serve::{AddrError, Endpoint, OPENMETRICS, PROMETHEUS};
use iodump_record::{LiveSink, RecorderStatus};

/// The metrics, fed with every event, and the endpoint they are rendered for.
pub(crate) struct Serving {
    pub(crate) metrics: Metrics,
    endpoint: Endpoint,
    expired: Instant,
}

/// How often idle series are dropped.
const EXPIRE_EVERY: Duration = Duration::from_secs(5);

impl Serving {
    /// Takes the port of `spec` (before anything is loaded: one in use is an error up front),
    /// starts the endpoint's thread and says where it serves. `container` narrows the
    /// metrics as `--container` does; `files` is how many file series are exported.
    pub(crate) fn start(
        spec: &str,
        container: Option<String>,
        files: usize,
    ) -> anyhow::Result<Serving> {
        let addr = iodump_record::serve::parse_addr(spec).map_err(|e| match e {
            AddrError::Syntax(m) => crate::args::usage(m),
            AddrError::Resolve(m) => anyhow::Error::msg(m),
        })?;
        let listener = iodump_record::serve::bind(addr).map_err(anyhow::Error::msg)?;
        let endpoint = Endpoint::start(listener).context("starting the --serve thread")?;
        eprintln!(
            "iodump: serving metrics on http://{}/metrics",
            endpoint.addr
        );
        Ok(Serving {
            metrics: Metrics::new(Resolver::new(), container, files),
            endpoint,
            expired: Instant::now(),
        })
    }

    /// Renders what requests wait for; drops idle series now and then.
    pub(crate) fn step(&mut self, status: &RecorderStatus) {
        if self.expired.elapsed() >= EXPIRE_EVERY {
            self.expired = Instant::now();
            self.metrics.expire(iodump_record::session::monotonic_ns());
        }
        let want = self.endpoint.wanted();
        if want == 0 {
            return;
        }
        self.metrics.set_recorder(status);
        for format in [PROMETHEUS, OPENMETRICS] {
            if want & format != 0 {
                let text = self.metrics.render(format == OPENMETRICS);
                self.endpoint.publish(format, text);
            }
        }
    }
}

impl LiveSink for Serving {
    fn event(&mut self, e: &Event, r: &IoEvent, conv: &Converter) {
        self.metrics.add(e, r, conv);
    }

    fn tick(&mut self, status: &RecorderStatus) -> bool {
        self.step(status);
        false
    }

    fn wants_in_flight(&self) -> bool {
        true
    }

    fn in_flight(&mut self, look: &InFlightLook, conv: &Converter) {
        self.metrics.set_in_flight(look, conv);
    }
}
