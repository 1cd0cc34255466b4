//! The vring messages of the rings vhost-blk's own threads serve (device::workers), decoded
//! for the device, and the frontend's address map they need.
//!
//! Rules:
//! 1. A message names a vring by the index in its payload: `VhostUserVringState.index`
//!    (SET_VRING_NUM, SET_VRING_BASE, SET_VRING_ENABLE, GET_VRING_BASE),
//!    `VhostUserVringAddr.index` (SET_VRING_ADDR), bits 0-7 of the u64 (SET_VRING_KICK, CALL,
//!    ERR; bit 8 set: no descriptor). A payload of the wrong size names no vring; the message
//!    goes to the crate's handler, which refuses it.
//! 2. The ring addresses of SET_VRING_ADDR are the frontend's virtual addresses; they are
//!    translated through the regions of the last SET_MEM_TABLE and the ADD_MEM_REGION /
//!    REM_MEM_REGION after it, in the order the frontend sent them ([`AddressMap`]), as
//!    vhost-user-backend's handler translates them for its rings. An address outside every
//!    region is refused.
//! 3. Sizes and counts come from the payload and are checked against its length: a region
//!    list longer than the payload is cut to what is there.

use std::fs::File;

use vhost::vhost_user::message::{
    FrontendReq, VhostUserMemory, VhostUserMemoryRegion, VhostUserSingleMemoryRegion, VhostUserU64,
    VhostUserVringAddr, VhostUserVringState,
};
use vm_memory::ByteValued;

use crate::device::workers::RingMsg;

/// SET_VRING_KICK/CALL/ERR payload bit: no descriptor passed (vhost-user specification).
pub const VRING_NOFD: u64 = 1 << 8;

/// `bytes` as `T`, if exactly that long (native byte order, as the protocol).
pub fn decode<T: ByteValued + Default>(bytes: &[u8]) -> Option<T> {
    let mut v = T::default();
    let out = v.as_mut_slice();
    (bytes.len() == out.len()).then(|| out.copy_from_slice(bytes))?;
    Some(v)
}

/// What the relay does with a message for one of our rings.
#[derive(Debug)]
pub enum OwnMsg {
    /// Hand it to the device.
    Ring(RingMsg),
    /// GET_VRING_BASE: stop the ring, answer with its next available index.
    Stop,
}

/// The vring a message names (rule 1), if it is a vring message.
pub fn ring_index(code: FrontendReq, payload: &[u8]) -> Option<usize> {
    match code {
        FrontendReq::SET_VRING_NUM
        | FrontendReq::SET_VRING_BASE
        | FrontendReq::SET_VRING_ENABLE
        | FrontendReq::GET_VRING_BASE => {
            decode::<VhostUserVringState>(payload).map(|s| s.index as usize)
        }
        FrontendReq::SET_VRING_ADDR => {
            decode::<VhostUserVringAddr>(payload).map(|a| a.index as usize)
        }
        FrontendReq::SET_VRING_KICK | FrontendReq::SET_VRING_CALL | FrontendReq::SET_VRING_ERR => {
            decode::<VhostUserU64>(payload).map(|v| (v.value & 0xff) as usize)
        }
        _ => None,
    }
}

/// The message for the device (rules 1 and 2); `file` is the descriptor sent with it.
pub fn own_msg(
    code: FrontendReq,
    payload: &[u8],
    file: Option<File>,
    map: &AddressMap,
) -> Result<OwnMsg, String> {
    let state = || decode::<VhostUserVringState>(payload).ok_or("bad payload");
    let fd = || {
        let v = decode::<VhostUserU64>(payload).ok_or("bad payload")?;
        Ok::<_, String>(if v.value & VRING_NOFD != 0 {
            None
        } else {
            file
        })
    };
    let msg = match code {
        FrontendReq::SET_VRING_NUM => {
            let num = state()?.num;
            RingMsg::Num(u16::try_from(num).map_err(|_| format!("size {num}"))?)
        }
        FrontendReq::SET_VRING_BASE => {
            let base = state()?.num;
            RingMsg::Base(u16::try_from(base).map_err(|_| format!("base {base}"))?)
        }
        FrontendReq::SET_VRING_ENABLE => RingMsg::Enable(state()?.num != 0),
        FrontendReq::GET_VRING_BASE => return Ok(OwnMsg::Stop),
        FrontendReq::SET_VRING_ADDR => {
            let a = decode::<VhostUserVringAddr>(payload).ok_or("bad payload")?;
            let gpa = |what: &str, va: u64| {
                map.gpa(va)
                    .ok_or_else(|| format!("{what} address {va:#x} outside guest memory"))
            };
            RingMsg::Addr {
                desc: gpa("descriptor", a.descriptor)?,
                avail: gpa("available", a.available)?,
                used: gpa("used", a.used)?,
            }
        }
        FrontendReq::SET_VRING_KICK => RingMsg::Kick(fd()?),
        FrontendReq::SET_VRING_CALL => RingMsg::Call(fd()?),
        FrontendReq::SET_VRING_ERR => RingMsg::Err(fd()?),
        _ => return Err("not a vring message".into()),
    };
    Ok(OwnMsg::Ring(msg))
}

/// One region of the frontend's memory: its virtual address, guest physical address, size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Region {
    va: u64,
    gpa: u64,
    size: u64,
}

impl From<&VhostUserMemoryRegion> for Region {
    fn from(r: &VhostUserMemoryRegion) -> Self {
        Self {
            va: r.user_addr,
            gpa: r.guest_phys_addr,
            size: r.memory_size,
        }
    }
}

/// The frontend's memory regions as its messages described them (rule 2).
#[derive(Debug, Default)]
pub struct AddressMap {
    regions: Vec<Region>,
}

impl AddressMap {
    /// Follows a memory message (others are ignored).
    pub fn observe(&mut self, code: FrontendReq, payload: &[u8]) {
        match code {
            FrontendReq::SET_MEM_TABLE => {
                let head = std::mem::size_of::<VhostUserMemory>();
                let Some(n) = payload
                    .get(..head)
                    .and_then(decode::<VhostUserMemory>)
                    .map(|m| m.num_regions as usize)
                else {
                    return;
                };
                let size = std::mem::size_of::<VhostUserMemoryRegion>();
                self.regions = payload
                    .get(head..)
                    .unwrap_or_default()
                    .chunks_exact(size)
                    .take(n)
                    .filter_map(decode::<VhostUserMemoryRegion>)
                    .map(|r| Region::from(&r))
                    .collect();
            }
            FrontendReq::ADD_MEM_REG => {
                if let Some(r) = decode::<VhostUserSingleMemoryRegion>(payload) {
                    self.regions.push(Region::from(&*r));
                }
            }
            FrontendReq::REM_MEM_REG => {
                if let Some(r) = decode::<VhostUserSingleMemoryRegion>(payload) {
                    self.regions.retain(|x| x.gpa != r.guest_phys_addr);
                }
            }
            _ => {}
        }
    }

    /// The guest physical address of the frontend's virtual address `va`.
    pub fn gpa(&self, va: u64) -> Option<u64> {
        self.regions.iter().find_map(|r| {
            let off = va.checked_sub(r.va).filter(|&o| o < r.size)?;
            r.gpa.checked_add(off)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vhost::vhost_user::message::VhostUserVringAddrFlags;

    fn table(regions: &[(u64, u64, u64)]) -> Vec<u8> {
        let mut p = VhostUserMemory::new(regions.len() as u32)
            .as_slice()
            .to_vec();
        for &(gpa, size, va) in regions {
            p.extend_from_slice(VhostUserMemoryRegion::new(gpa, size, va, 0).as_slice());
        }
        p
    }

    #[test]
    fn addresses_translate_through_the_regions_as_the_frontend_changed_them() {
        let mut m = AddressMap::default();
        m.observe(
            FrontendReq::SET_MEM_TABLE,
            &table(&[(0, 0x1000, 0x7000_0000), (0x10_0000, 0x2000, 0x9000_0000)]),
        );
        assert_eq!(m.gpa(0x7000_0010), Some(0x10));
        assert_eq!(m.gpa(0x9000_1fff), Some(0x10_1fff));
        assert_eq!(m.gpa(0x9000_2000), None, "one past the end");
        assert_eq!(m.gpa(0x6fff_ffff), None);
        let r = VhostUserSingleMemoryRegion::new(0x20_0000, 0x1000, 0xa000_0000, 0);
        m.observe(FrontendReq::ADD_MEM_REG, r.as_slice());
        assert_eq!(m.gpa(0xa000_0004), Some(0x20_0004));
        let r = VhostUserSingleMemoryRegion::new(0, 0x1000, 0x7000_0000, 0);
        m.observe(FrontendReq::REM_MEM_REG, r.as_slice());
        assert_eq!(m.gpa(0x7000_0010), None);
        // A count past the payload: only the regions that are there (rule 3); a short header
        // leaves the map as it was.
        let mut p = table(&[(0, 0x1000, 0x1000)]);
        p.get_mut(..4)
            .unwrap()
            .copy_from_slice(&1000u32.to_ne_bytes());
        m.observe(FrontendReq::SET_MEM_TABLE, &p);
        assert_eq!(m.gpa(0x1800), Some(0x800));
        m.observe(FrontendReq::SET_MEM_TABLE, &[1, 2]);
        assert_eq!(m.gpa(0x1800), Some(0x800));
        // Overflowing arithmetic finds nothing.
        m.observe(FrontendReq::SET_MEM_TABLE, &table(&[(u64::MAX, 16, 0)]));
        assert_eq!(m.gpa(8), None);
    }

    #[test]
    fn vring_messages_name_their_ring_and_decode_for_the_device() {
        let st = VhostUserVringState::new(130, 256);
        assert_eq!(
            ring_index(FrontendReq::SET_VRING_NUM, st.as_slice()),
            Some(130)
        );
        assert_eq!(ring_index(FrontendReq::SET_VRING_NUM, &[0; 3]), None);
        let kick = VhostUserU64::new(0x181);
        assert_eq!(
            ring_index(FrontendReq::SET_VRING_KICK, kick.as_slice()),
            Some(0x81)
        );
        assert_eq!(ring_index(FrontendReq::SET_FEATURES, kick.as_slice()), None);
        let map = AddressMap::default();
        let m = own_msg(FrontendReq::SET_VRING_KICK, kick.as_slice(), None, &map).unwrap();
        assert!(matches!(m, OwnMsg::Ring(RingMsg::Kick(None))));
        let m = own_msg(FrontendReq::SET_VRING_NUM, st.as_slice(), None, &map).unwrap();
        assert!(matches!(m, OwnMsg::Ring(RingMsg::Num(256))));
        let big = VhostUserVringState::new(130, 70_000);
        assert!(own_msg(FrontendReq::SET_VRING_BASE, big.as_slice(), None, &map).is_err());
        let addr = VhostUserVringAddr::new(
            130,
            VhostUserVringAddrFlags::empty(),
            0x1000,
            0x2000,
            0x3000,
            0,
        );
        let e = own_msg(FrontendReq::SET_VRING_ADDR, addr.as_slice(), None, &map).unwrap_err();
        assert!(e.contains("outside guest memory"), "{e}");
        let mut map = AddressMap::default();
        map.observe(FrontendReq::SET_MEM_TABLE, &table(&[(0, 0x10000, 0)]));
        let m = own_msg(FrontendReq::SET_VRING_ADDR, addr.as_slice(), None, &map).unwrap();
        assert!(matches!(
            m,
            OwnMsg::Ring(RingMsg::Addr {
                desc: 0x1000,
                used: 0x2000,
                avail: 0x3000
            })
        ));
    }
}
