// The libjvm.so of fakejvm.c: HotSpot's serviceability table, empty.
char gHotSpotVMStructs[64];
