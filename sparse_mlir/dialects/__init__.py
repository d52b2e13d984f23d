"""Python op classes of the smlir dialect, generated from the same ODS as C++."""
