/* Prints x, sinf(x), cosf(x) as hex bits for inputs across glibc's branches. */
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
static uint32_t bits(float f){uint32_t u;memcpy(&u,&f,4);return u;}
static float flt(uint32_t u){float f;memcpy(&f,&u,4);return f;}
int main(void){
  uint32_t xs[] = {0x00000000,0x39800000,0x397fffff,0x3f490fdb,0x3f490fda,0x42f00000,0x42efffff,0x3f800000,
    0x40000000,0x40490fdb,0x41200000,0x42c80000,0x447a0000,0x461c4000,0x47c35000,0x4b000000,0x4e6e6b28,
    0xbf800000,0xc2f00000,0x3c24017e,0x3e30e57b,0x3f5ced8f,0x3fcd71b5,0x40d3f7df,0x418f7d64,0x41da7efc};
  for (unsigned i=0;i<sizeof xs/sizeof xs[0];i++){float x=flt(xs[i]);printf("%08x %08x %08x\n",xs[i],bits(sinf(x)),bits(cosf(x)));}
  /* RoPE angles where glibc is not correctly rounded: pos·10000^(-2i/128). */
  float ts = powf(10000.f, -2.0f/128); int n=0;
  for (int p=1; p<4096 && n<24; p+=7){ float th=(float)p; for(int i=0;i<64 && n<24;i++){ float c=cosf(th), s=sinf(th);
    if (c!=(float)cos((double)th) || s!=(float)sin((double)th)) { printf("%08x %08x %08x\n",bits(th),bits(s),bits(c)); n++; } th*=ts; } }
  return 0;
}
