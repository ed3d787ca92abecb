//! Segments: range and step arithmetic and the double buffer.
