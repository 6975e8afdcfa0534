// Anchor for the shared precompiled torch header (see cmake/HpcrlModules.cmake).
