/* Wine 8 (Debian 12's wine64) has no bcryptprimitives.dll, whose ProcessPrng is where Rust's
 * std (1.78 and later) takes its random bytes on Windows: a program built for Windows fails to
 * start. This stand-in answers ProcessPrng with advapi32's RtlGenRandom (SystemFunction036),
 * which Wine has. Built with mingw and put into the test's own Wine prefix (tests/src/windows.rs);
 * Windows itself and Wine 9 have the real one. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
