//! Locates the C reference build (being written).
