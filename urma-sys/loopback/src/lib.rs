//! Loopback URMA provider (being written).
