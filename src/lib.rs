//! mlcachedirect (being written).
