//! URMA bindings (being written).
