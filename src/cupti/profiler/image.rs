//! Counter data saved to a file, to be evaluated later or elsewhere (the metric host needs no GPU): a small
//! container around CUPTI's counter-data image that names the chip, the method and the metrics, and guards the
//! image with its length and an FNV-1a hash.
//!
//! The container is parsed with bounds checks; the image inside is CUPTI's own format, which CUPTI parses without
//! checking, so evaluating one (`host::Host::evaluate`) stays `unsafe`: a file from the crate's own writer whose
//! hash matches holds the bytes CUPTI wrote.
//!
//! Layout (little-endian): magic `GTCNTRS1` (8), version u16 (1), method u8 (1 range profiler, 2 PM sampling),
//! reserved u8, chip (u16 length + UTF-8), metric count u16, each metric (u16 length + UTF-8), record count u32,
//! each record (u16 length + UTF-8 name, start u64, end u64), image length u64, image FNV-1a-64 u64, image bytes.
//!
//! ```
//! use gpu_tools::cupti::profiler::{Method, image::{CounterDataFile, RecordInfo}};
//!
//! let file = CounterDataFile {
//!     method: Method::RangeProfiler,
//!     chip: "GH100".into(),
//!     metrics: vec!["dram__bytes_read.sum".into()],
//!     records: vec![RecordInfo { name: "copy".into(), start: 0, end: 0 }],
//!     image: vec![1, 2, 3],
//! };
//! let bytes = file.to_bytes();
//! assert_eq!(CounterDataFile::parse(&bytes).unwrap(), file);
//! assert!(CounterDataFile::parse(&bytes[..bytes.len() - 1]).is_err());
//! ```

use super::Method;

/// The first 8 bytes of a file.
pub const MAGIC: [u8; 8] = *b"GTCNTRS1";
/// The version written.
pub const VERSION: u16 = super::error::IMAGE_FILE_VERSION;
/// Longest chip name, metric name or record name accepted.
pub const MAX_NAME: usize = 4096;
/// Most metrics accepted.
pub const MAX_METRICS: usize = 4096;
/// Most records accepted.
pub const MAX_RECORDS: usize = 1 << 20;
/// Largest image accepted.
pub const MAX_IMAGE: u64 = 1 << 32;

pub use super::error::ImageFileError;

/// What the writer knew about one range or sample of the image (its name, and for samples the GPU timestamps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordInfo {
    /// The range name (empty for samples).
    pub name: String,
    /// Start timestamp (0 where not known).
    pub start: u64,
    /// End timestamp (0 where not known).
    pub end: u64,
}

/// One saved counter-data image and what it was made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterDataFile {
    /// The method that filled it.
    pub method: Method,
    /// The chip it was collected on (the metric host evaluates for it).
    pub chip: String,
    /// The metrics its configuration collected.
    pub metrics: Vec<String>,
    /// What the writer knew about each range or sample.
    pub records: Vec<RecordInfo>,
    /// CUPTI's counter-data image.
    pub image: Vec<u8>,
}

/// FNV-1a, 64 bits.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn method_code(m: Method) -> u8 {
    match m {
        Method::RangeProfiler => 1,
        Method::PmSampling => 2,
    }
}

impl CounterDataFile {
    /// The file's bytes. Names longer than [`MAX_NAME`] are cut at a character boundary.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.image.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.push(method_code(self.method));
        out.push(0);
        put_str(&mut out, &self.chip);
        out.extend_from_slice(&(self.metrics.len().min(MAX_METRICS) as u16).to_le_bytes());
        for m in self.metrics.iter().take(MAX_METRICS) {
            put_str(&mut out, m);
        }
        out.extend_from_slice(&(self.records.len().min(MAX_RECORDS) as u32).to_le_bytes());
        for r in self.records.iter().take(MAX_RECORDS) {
            put_str(&mut out, &r.name);
            out.extend_from_slice(&r.start.to_le_bytes());
            out.extend_from_slice(&r.end.to_le_bytes());
        }
        out.extend_from_slice(&(self.image.len() as u64).to_le_bytes());
        out.extend_from_slice(&fnv1a64(&self.image).to_le_bytes());
        out.extend_from_slice(&self.image);
        out
    }

    /// Reads a file, checking every length, the limits and the image's hash.
    pub fn parse(bytes: &[u8]) -> Result<CounterDataFile, ImageFileError> {
        let mut r = Reader { bytes, pos: 0 };
        let magic: [u8; 8] = r.array("magic")?;
        if magic != MAGIC {
            return Err(ImageFileError::BadMagic(magic));
        }
        let version = u16::from_le_bytes(r.array("version")?);
        if version != VERSION {
            return Err(ImageFileError::Version(version));
        }
        let [method, _reserved] = r.array::<2>("method")?;
        let method = match method {
            1 => Method::RangeProfiler,
            2 => Method::PmSampling,
            m => return Err(ImageFileError::Method(m)),
        };
        let chip = r.string("chip name")?;
        let n_metrics = usize::from(u16::from_le_bytes(r.array("metric count")?));
        limit("metric count", n_metrics as u64, MAX_METRICS as u64)?;
        let mut metrics = Vec::with_capacity(n_metrics);
        for _ in 0..n_metrics {
            metrics.push(r.string("metric name")?);
        }
        let n_records = u32::from_le_bytes(r.array("record count")?) as usize;
        limit("record count", n_records as u64, MAX_RECORDS as u64)?;
        // Each record takes at least 18 bytes: refuse counts the rest of the file cannot hold before allocating.
        if n_records.saturating_mul(18) > r.left() {
            return Err(ImageFileError::Truncated("records"));
        }
        let mut records = Vec::with_capacity(n_records);
        for _ in 0..n_records {
            let name = r.string("record name")?;
            let start = u64::from_le_bytes(r.array("record start")?);
            let end = u64::from_le_bytes(r.array("record end")?);
            records.push(RecordInfo { name, start, end });
        }
        let len = u64::from_le_bytes(r.array("image length")?);
        limit("image length", len, MAX_IMAGE)?;
        let stored = u64::from_le_bytes(r.array("image hash")?);
        let image = r
            .take(usize::try_from(len).unwrap_or(usize::MAX), "image")?
            .to_vec();
        if r.left() != 0 {
            return Err(ImageFileError::TrailingBytes(r.left()));
        }
        let found = fnv1a64(&image);
        if found != stored {
            return Err(ImageFileError::HashMismatch { found, stored });
        }
        Ok(CounterDataFile {
            method,
            chip,
            metrics,
            records,
            image,
        })
    }
}

/// One range or sample of an evaluated file.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluatedRecord {
    /// The range's name (empty for samples).
    pub name: String,
    /// Start timestamp (samples; 0 where neither CUPTI nor the file knows it).
    pub start: u64,
    /// End timestamp, same clock.
    pub end: u64,
    /// One value per metric of the file.
    pub values: Vec<f64>,
}

impl CounterDataFile {
    /// Evaluates every range or sample of the image with the metric host for the file's chip (no GPU needed).
    /// Sample timestamps come from CUPTI where it gives them for an image without its sampler, else from the
    /// file's records.
    ///
    /// # Safety
    /// The image must be one CUPTI wrote (for example read back from a file this crate wrote, whose hash
    /// matched): CUPTI parses it without checking it against its length.
    pub unsafe fn evaluate(&self) -> crate::Result<Vec<EvaluatedRecord>> {
        use super::api::{Api, Needs};
        use super::counter_data;
        let api = Api::load(Needs::Metrics)?;
        let host = super::host::Host::create(api, &self.chip, self.method, None)?;
        let metrics = super::host::MetricNames::new(&self.metrics)?;
        let image = &self.image;
        let mut out = Vec::new();
        match self.method {
            Method::RangeProfiler => {
                // SAFETY: the caller's contract.
                let ranges = unsafe { counter_data::evaluate_ranges(api, &host, image, &metrics) }?;
                for (name, values) in ranges {
                    out.push(EvaluatedRecord {
                        name,
                        start: 0,
                        end: 0,
                        values,
                    });
                }
            }
            Method::PmSampling => {
                // SAFETY: the caller's contract.
                let n = unsafe { counter_data::completed_samples(api, image) }?;
                for i in 0..n {
                    // SAFETY: as above; `i` is below the completed count; no sampler object.
                    let times =
                        unsafe { counter_data::sample_times(api, std::ptr::null_mut(), image, i) };
                    let (start, end) = times
                        .ok()
                        .or_else(|| self.records.get(i).map(|r| (r.start, r.end)))
                        .unwrap_or((0, 0));
                    // SAFETY: as above.
                    let values = unsafe { host.evaluate(image, i, &metrics) }?;
                    out.push(EvaluatedRecord {
                        name: String::new(),
                        start,
                        end,
                        values,
                    });
                }
            }
        }
        Ok(out)
    }
}

fn limit(what: &'static str, value: u64, limit: u64) -> Result<(), ImageFileError> {
    if value > limit {
        Err(ImageFileError::TooLarge { what, value, limit })
    } else {
        Ok(())
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_NAME);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_le_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// A cursor over a file's bytes; each read goes through [`crate::bytes`], the crate's bounds-checked read path.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ImageFileError> {
        let out = crate::bytes::range(self.bytes, self.pos as u64, n as u64)
            .ok_or(ImageFileError::Truncated(what))?;
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ImageFileError> {
        let out =
            crate::bytes::array(self.bytes, self.pos).ok_or(ImageFileError::Truncated(what))?;
        self.pos += N;
        Ok(out)
    }

    fn string(&mut self, what: &'static str) -> Result<String, ImageFileError> {
        let len = usize::from(u16::from_le_bytes(self.array(what)?));
        limit(what, len as u64, MAX_NAME as u64)?;
        let bytes = self.take(len, what)?;
        std::str::from_utf8(bytes)
            .map(str::to_string)
            .map_err(|_| ImageFileError::NotUtf8(what))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> CounterDataFile {
        CounterDataFile {
            method: Method::PmSampling,
            chip: "GH100".into(),
            metrics: vec![
                "sm__cycles_active.avg".into(),
                "dram__bytes_read.sum.per_second".into(),
            ],
            records: vec![RecordInfo {
                name: String::new(),
                start: 10,
                end: 20,
            }],
            image: (0..=255u8).collect(),
        }
    }

    #[test]
    fn files_round_trip_and_every_cut_is_refused() {
        let f = sample();
        let bytes = f.to_bytes();
        assert_eq!(CounterDataFile::parse(&bytes), Ok(f));
        for cut in 0..bytes.len() {
            assert!(
                CounterDataFile::parse(&bytes[..cut]).is_err(),
                "cut at {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            CounterDataFile::parse(&longer),
            Err(ImageFileError::TrailingBytes(1))
        );
    }

    #[test]
    fn a_changed_image_byte_is_caught() {
        let mut bytes = sample().to_bytes();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(matches!(
            CounterDataFile::parse(&bytes),
            Err(ImageFileError::HashMismatch { .. })
        ));
    }

    #[test]
    fn header_errors_are_typed() {
        let mut bytes = sample().to_bytes();
        bytes[0] = b'X';
        assert!(matches!(
            CounterDataFile::parse(&bytes),
            Err(ImageFileError::BadMagic(_))
        ));
        let mut bytes = sample().to_bytes();
        bytes[8] = 9;
        assert_eq!(
            CounterDataFile::parse(&bytes),
            Err(ImageFileError::Version(9))
        );
        let mut bytes = sample().to_bytes();
        bytes[10] = 7;
        assert_eq!(
            CounterDataFile::parse(&bytes),
            Err(ImageFileError::Method(7))
        );
    }

    #[test]
    fn fnv_is_the_reference_function() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }
}
