//! The synthetic host's block devices: their table entries, sizes and service-time models.

use iodump_format::{DevT, Device, Op};

// Device indices, in the order [`devices`] delivers them (nvme0n1 itself, index 0, carries
// no filesystem).
/// nvme0n1p1, `/boot`.
pub(crate) const D_BOOT: usize = 1;
/// nvme0n1p2, `/` (ext4).
pub(crate) const D_ROOT: usize = 2;
/// sda, the SATA disk (read raw by udisksd and blkid).
pub(crate) const D_SDA: usize = 3;
/// sda1, `/srv/backup` (xfs).
pub(crate) const D_BACKUP: usize = 4;
/// vda, `/srv/app` (ext4).
pub(crate) const D_VDA: usize = 5;
/// zram0, swap.
pub(crate) const D_ZRAM: usize = 6;
/// How many devices there are.
pub(crate) const N_DEV: usize = 7;

/// Size of each device in 512-byte sectors.
pub(crate) const DEV_SECTORS: [u64; N_DEV] = [
    3_907_029_168,
    2_097_152,
    3_904_927_744,
    7_814_037_168,
    7_814_033_408,
    536_870_912,
    16_777_216,
];

/// The device table, indexed by the `D_*` constants: whole disks before their partitions.
pub(crate) fn devices() -> Vec<Device> {
    let dev = |maj, min, name: &str, part: Option<DevT>, ss, start, bio| Device {
        dev: DevT::new(maj, min),
        name: name.to_string(),
        partition_of: part,
        sector_size: ss,
        start_sector: start,
        bio_based: bio,
        label: String::new(),
        stacked_on: Vec::new(),
    };
    let nvme = Some(DevT::new(259, 0));
    let sda = Some(DevT::new(8, 0));
    vec![
        dev(259, 0, "nvme0n1", None, 4096, 0, false),
        dev(259, 1, "nvme0n1p1", nvme, 4096, 2048, false),
        dev(259, 2, "nvme0n1p2", nvme, 4096, 2_099_200, false),
        dev(8, 0, "sda", None, 512, 0, false),
        dev(8, 1, "sda1", sda, 512, 2048, false),
        dev(254, 0, "vda", None, 512, 0, false),
        dev(252, 0, "zram0", None, 4096, 0, true),
    ]
}

/// Service-time model of a device: medians in ns, log-normal spread.
/// Service-time model of a device: medians in ns, log-normal spread.
#[derive(Clone, Copy)]
pub(crate) struct DeviceModel {
    read_ns: f64,
    seq_read_ns: f64,
    write_ns: f64,
    seq_write_ns: f64,
    read_ns_per_byte: f64,
    write_ns_per_byte: f64,
    flush_ns: f64,
    discard_ns: f64,
    discard_ns_per_byte: f64,
    /// Standard deviation of the service time's logarithm.
    pub(crate) sigma: f64,
    /// Queueing multiplier (deep queues on slow disks).
    pub(crate) queue_factor: f64,
}

impl DeviceModel {
    /// The median service time of an I/O; writes with FUA take 1.6 times as long.
    pub(crate) fn median_ns(&self, op: Op, bytes: u32, sequential: bool, fua: bool) -> f64 {
        let bytes = bytes as f64;
        match op {
            Op::Read => {
                (if sequential {
                    self.seq_read_ns
                } else {
                    self.read_ns
                }) + self.read_ns_per_byte * bytes
            }
            Op::Flush => self.flush_ns,
            Op::Discard | Op::SecureErase => self.discard_ns + self.discard_ns_per_byte * bytes,
            _ => {
                let base = if sequential {
                    self.seq_write_ns
                } else {
                    self.write_ns
                };
                let fua = if fua { 1.6 } else { 1.0 };
                (base + self.write_ns_per_byte * bytes) * fua
            }
        }
    }
}

/// A fast NVMe SSD.
const NVME: DeviceModel = DeviceModel {
    read_ns: 96_000.0,
    seq_read_ns: 75_000.0,
    write_ns: 26_000.0,
    seq_write_ns: 22_000.0,
    read_ns_per_byte: 0.17,
    write_ns_per_byte: 0.31,
    flush_ns: 750_000.0,
    discard_ns: 160_000.0,
    discard_ns_per_byte: 0.0008,
    sigma: 0.2,
    queue_factor: 1.0,
};

/// A 7200 rpm SATA disk: seeks dominate random I/O.
const SATA_HDD: DeviceModel = DeviceModel {
    read_ns: 4_300_000.0,
    seq_read_ns: 420_000.0,
    write_ns: 3_100_000.0,
    seq_write_ns: 330_000.0,
    read_ns_per_byte: 5.2,
    write_ns_per_byte: 5.5,
    flush_ns: 12_000_000.0,
    discard_ns: 4_000_000.0,
    discard_ns_per_byte: 0.0,
    sigma: 0.33,
    queue_factor: 4.0,
};

/// A virtio-blk disk backed by the hypervisor's SSDs.
const VIRTIO: DeviceModel = DeviceModel {
    read_ns: 185_000.0,
    seq_read_ns: 150_000.0,
    write_ns: 230_000.0,
    seq_write_ns: 185_000.0,
    read_ns_per_byte: 0.8,
    write_ns_per_byte: 1.0,
    flush_ns: 1_300_000.0,
    discard_ns: 420_000.0,
    discard_ns_per_byte: 0.002,
    sigma: 0.3,
    queue_factor: 1.5,
};

/// zram: (de)compression in RAM.
const ZRAM: DeviceModel = DeviceModel {
    read_ns: 8_500.0,
    seq_read_ns: 8_500.0,
    write_ns: 12_500.0,
    seq_write_ns: 12_500.0,
    read_ns_per_byte: 0.5,
    write_ns_per_byte: 1.1,
    flush_ns: 3_000.0,
    discard_ns: 15_000.0,
    discard_ns_per_byte: 0.0,
    sigma: 0.25,
    queue_factor: 1.0,
};

/// The model of each device, by index.
pub(crate) const DEVICE_MODELS: [DeviceModel; N_DEV] =
    [NVME, NVME, NVME, SATA_HDD, SATA_HDD, VIRTIO, ZRAM];
