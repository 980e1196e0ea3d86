// sporadic's Raspberry Pi Pico emulator: the real MicroPython rp2 firmware
// in rp2040js, its USB-CDC serial stream on this process's stdin/stdout.
//
//   node run.mjs --bootrom ROM.bin --flash FLASH.bin [--firmware FW.uf2]
//                [--image FS.bin --image-offset 0xA0000] [--unpaced]
//                [--stats FILE] [-v]
//
// What it adds to stock rp2040js (1.4.1), as a real Pico behaves:
// * flash writes: the firmware erases and programs flash through the boot
//   ROM's flash_range_erase / flash_range_program (found through the ROM's
//   function table); their entries are patched with BKPT and serviced on the
//   emulator's flash array (erase sets 0xff, programming only clears bits),
//   taking a flash chip's typical time. Every erased or programmed range is
//   written through to the --flash file at once, so a SIGKILL (a power cut)
//   keeps exactly what the chip had finished, as a real flash does.
// * USB: an OUT transfer on the CDC data endpoint is held until the host has
//   bytes (a real host NAKs); stock rp2040js answers at once with nothing,
//   so the firmware took a USB interrupt every 10 us even when idle.
// * UART TX interrupt: raised only when a byte has left, not for ever.
// * resets: a watchdog reset (machine.reset(), a watchdog timeout) or
//   SIGUSR1 (the reset button) boots a new chip on the same flash; the
//   watchdog's reason register and, after a watchdog reset, its eight
//   scratch registers survive, as on silicon (RP2040 datasheet 4.7.5: they
//   persist through a soft reset of the chip).
// * time: paced to the wall clock (the emulated clock never runs ahead of
//   the wall, idle time is waited, not skipped, and time the emulator was
//   too slow for is given up: the board's clock then trails the wall, as a
//   slow board's does, until a sync sets it) unless --unpaced.
// * sleeps: every WFI the core executes is counted and the instruction count
//   at the last SLEEP_MARKS of them kept (--stats: sleep_marks). In this
//   firmware only machine.lightsleep/deepsleep execute WFI (an idle REPL
//   and time.sleep_ms wait with WFE), so the first mark after a boot is the
//   instructions from power-on to the board's first sleep.
// Exit: SIGTERM/SIGINT or the end of stdin. SIGUSR2 writes --stats, after
// reading FILE.pace if there is one: "paced" or "unpaced" from now on (a
// bench syncs paced, then lets the board run unpaced).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const FLASH_BYTES = 2 * 1024 * 1024; // RPI_PICO: W25Q16JV, 2 MiB
const XIP_BASE = 0x10000000;
const SECTOR = 4096;
const ERASE_NS_PER_SECTOR = 45e6; // W25Q16JV tSE typical 45 ms
const PROGRAM_NS_PER_PAGE = 0.4e6; // tPP typical 0.4 ms a 256-byte page
const CYCLE_NS = 1e9 / 125e6;
const MAX_LAG_NS = 50e6; // paced: how far the emulated clock may trail the wall before it gives the time up
const BKPT_ERASE = 0x51;
const BKPT_PROGRAM = 0x52;
const OP_WFI = 0xbf30;
const SLEEP_MARKS = 32;

function die(msg) {
  // the one line a user sees (companion vboard prints nothing more)
  process.stderr.write('companion: ' + msg + '\n');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { unpaced: false, verbose: false, imageOffset: 0xa0000 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) die(a + ' needs a value');
      return argv[++i];
    };
    if (a === '--bootrom') opts.bootrom = val();
    else if (a === '--firmware') opts.firmware = val();
    else if (a === '--flash') opts.flash = val();
    else if (a === '--image') opts.image = val();
    else if (a === '--image-offset') opts.imageOffset = Number(val());
    else if (a === '--stats') opts.stats = val();
    else if (a === '--unpaced') opts.unpaced = true;
    else if (a === '-v' || a === '--verbose') opts.verbose = true;
    else die('unknown argument ' + a);
  }
  opts.bootrom = opts.bootrom || process.env.SPORADIC_RP2_BOOTROM;
  if (!opts.bootrom) die('no boot ROM: --bootrom FILE or SPORADIC_RP2_BOOTROM');
  if (!opts.flash) die('no flash file: --flash FILE');
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const modules = process.env.SPORADIC_RP2EMU_MODULES || path.join(here, 'node_modules');
let rp2040js;
try {
  rp2040js = await import(pathToFileURL(path.join(modules, 'rp2040js', 'dist', 'esm', 'index.js')).href);
} catch (e) {
  die('rp2040js is not installed in ' + modules + ' (npm ci --prefix ' + here + ')');
}
const { RP2040, USBCDC, BasePeripheral } = rp2040js;
const { SimulationClock } = await import(
  pathToFileURL(path.join(modules, 'rp2040js', 'dist', 'esm', 'clock', 'simulation-clock.js')).href);

// rp2040js reports a few unmodelled registers with console.warn
if (!opts.verbose) console.warn = () => {};

function log(msg) {
  if (opts.verbose) process.stderr.write('rp2emu: ' + msg + '\n');
}

const quietLogger = {
  debug() {},
  info() {},
  warn(component, msg) { if (opts.verbose) process.stderr.write(`rp2emu: [${component}] ${msg}\n`); },
  error(component, msg) { process.stderr.write(`rp2emu: [${component}] ${msg}\n`); },
};

// (read and checked before the flash file is touched: a bad file changes nothing)
function readUF2(file) {
  let data;
  try {
    data = fs.readFileSync(file);
  } catch (e) {
    die('cannot read firmware ' + file + ': ' + e.message);
  }
  if (data.length % 512 || data.length === 0) die(file + ' is not a UF2 file');
  const blocks = [];
  for (let off = 0; off < data.length; off += 512) {
    const magic0 = data.readUInt32LE(off), magic1 = data.readUInt32LE(off + 4);
    const end = data.readUInt32LE(off + 508);
    if (magic0 !== 0x0a324655 || magic1 !== 0x9e5d5157 || end !== 0x0ab16f30) die(file + ' is not a UF2 file');
    const flags = data.readUInt32LE(off + 8);
    if (flags & 1) continue; // "not main flash"
    if (flags & 0x2000 && data.readUInt32LE(off + 28) !== 0xe48bff56) die(file + ' is not an RP2040 UF2 (family)');
    const target = data.readUInt32LE(off + 12), size = data.readUInt32LE(off + 16);
    const at = target - XIP_BASE;
    if (at < 0 || at + size > FLASH_BYTES) die(file + ': block outside the 2 MiB flash at 0x' + target.toString(16));
    blocks.push([at, data.subarray(off + 32, off + 32 + size)]);
  }
  return blocks;
}
const firmwareBlocks = opts.firmware ? readUF2(opts.firmware) : null;
let imageBytes = null;
if (opts.image) {
  try {
    imageBytes = fs.readFileSync(opts.image);
  } catch (e) {
    die('cannot read image ' + opts.image + ': ' + e.message);
  }
  if (opts.imageOffset + imageBytes.length > FLASH_BYTES) die('image does not fit the flash at 0x' + opts.imageOffset.toString(16));
}

// ---- the flash chip and its file --------------------------------------
const flash = new Uint8Array(FLASH_BYTES).fill(0xff);
let flashFd;
try {
  flashFd = fs.openSync(opts.flash, fs.existsSync(opts.flash) ? 'r+' : 'w+');
} catch (e) {
  die('cannot open flash file ' + opts.flash + ': ' + e.message);
}
{
  const got = fs.readSync(flashFd, flash, 0, FLASH_BYTES, 0);
  if (got < FLASH_BYTES) flash.fill(0xff, got);
}

function persist(offset, length) {
  fs.writeSync(flashFd, flash, offset, length, offset);
}

if (firmwareBlocks) {
  for (const [at, bytes] of firmwareBlocks) flash.set(bytes, at);
  log(`firmware ${opts.firmware}: ${firmwareBlocks.length} blocks`);
}
if (imageBytes) {
  flash.set(imageBytes, opts.imageOffset);
  log(`image ${opts.image}: ${imageBytes.length} bytes at 0x${opts.imageOffset.toString(16)}`);
}
if (opts.firmware || opts.image) {
  persist(0, FLASH_BYTES);
  fs.fsyncSync(flashFd);
}
if (flash[0] === 0xff && flash[1] === 0xff) die('the flash holds no firmware: give --firmware FILE.uf2');

// ---- the boot ROM, with its two flash writers patched to BKPT -----------
let romBytes;
try {
  romBytes = fs.readFileSync(opts.bootrom);
} catch (e) {
  die('cannot read boot ROM ' + opts.bootrom + ': ' + e.message);
}
if (romBytes.length !== 16384) die(opts.bootrom + ' is not a 16 KiB RP2040 boot ROM');
const rom = new Uint8Array(romBytes);
{
  const view = new DataView(rom.buffer);
  if (view.getUint8(0x10) !== 0x4d || view.getUint8(0x11) !== 0x75) die(opts.bootrom + ' is not an RP2040 boot ROM');
  const table = view.getUint16(0x14, true);
  const found = {};
  for (let p = table; p + 4 <= rom.length; p += 4) {
    const code = view.getUint16(p, true);
    if (!code) break;
    found[String.fromCharCode(code & 0xff, code >> 8)] = view.getUint16(p + 2, true) & ~1;
  }
  if (found.RE === undefined || found.RP === undefined) die('no flash_range_erase/program in the boot ROM table');
  view.setUint16(found.RE, 0xbe00 | BKPT_ERASE, true);
  view.setUint16(found.RP, 0xbe00 | BKPT_PROGRAM, true);
  log(`boot ROM: flash_range_erase 0x${found.RE.toString(16)}, flash_range_program 0x${found.RP.toString(16)}`);
}
const romWords = new Uint32Array(rom.buffer);

// ---- host side of USB CDC ----------------------------------------------
const toDevice = []; // Buffers from stdin not yet taken by the firmware
let toDeviceHead = 0; // offset into toDevice[0]
let heldRead = null; // {endpoint, size}: an OUT transfer waiting for bytes

function takeBytes(size) {
  const out = [];
  let n = 0;
  while (n < size && toDevice.length) {
    const buf = toDevice[0];
    const k = Math.min(size - n, buf.length - toDeviceHead);
    out.push(buf.subarray(toDeviceHead, toDeviceHead + k));
    n += k;
    toDeviceHead += k;
    if (toDeviceHead >= buf.length) { toDevice.shift(); toDeviceHead = 0; }
  }
  return Buffer.concat(out, n);
}

// ---- the chip -------------------------------------------------------------
let chip, clock, cdc, bootWall, bootNanos;
let rebootWanted = false;
let lastReason = 0;
let instructions = 0; // since this process started
let boots = 0;
let erasedSectors = 0; // flash sectors erased, since this process started
let programmedBytes = 0;
let bootInstructions = 0; // the instruction count when the current chip was powered on
let sleepMarks = []; // the instruction count at the last SLEEP_MARKS WFIs
let wfis = 0;
let lastScratch = null; // the watchdog's scratch registers through a watchdog reset

function boot() {
  clock = new SimulationClock();
  chip = new RP2040(clock);
  chip.logger = quietLogger;
  chip.loadBootrom(romWords); // (resets the chip, which blanks its flash array)
  chip.flash.set(flash);
  // The ROM would read the second-stage loader through the SSI, which has
  // no flash chip behind it in rp2040js; start at boot2 in flash instead,
  // as the ROM does once boot2 is loaded (it runs from XIP here).
  chip.core.PC = XIP_BASE;
  const watchdog = chip.peripherals[0x40058];
  watchdog.reason = lastReason;
  if (lastScratch) watchdog.scratchData.set(lastScratch);
  lastScratch = null;
  watchdog.onWatchdogTrigger = () => {
    lastReason = watchdog.reason;
    lastScratch = watchdog.scratchData.slice();
    // this chip is done: stop its watchdog (rp2040js re-arms an expired one
    // at the same instant, for ever) and boot a new one from the flash
    watchdog.alarm.enable = false;
    watchdog.timer.enable = false;
    log(`watchdog reset (reason ${lastReason}) at ${(clock.nanos / 1e9).toFixed(3)} s`);
    rebootWanted = true;
  };
  chip.onBreak = (code) => serviceBreak(code);
  chip.peripherals[0x40064] = new ChipReset(chip, lastReason ? 0 : HAD_POR);
  fixUartTx(chip);
  heldRead = null;
  cdc = new USBCDC(chip.usbCtrl);
  cdc.onSerialData = (data) => process.stdout.write(Buffer.from(data));
  chip.usbCtrl.onEndpointRead = (endpoint, size) => {
    if (endpoint !== cdc.outEndpoint) return;
    if (toDevice.length) chip.usbCtrl.endpointReadDone(endpoint, takeBytes(size));
    else heldRead = { endpoint, size };
  };
  bootWall = performance.now();
  bootNanos = 0;
  bootInstructions = instructions;
  boots++;
  log(`boot ${boots} (watchdog reason ${lastReason})`);
}

function serviceBreak(code) {
  const core = chip.core;
  const r = core.registers;
  if (code === BKPT_ERASE) {
    const start = r[0] >>> 0, count = r[1] >>> 0;
    const from = Math.floor(start / SECTOR) * SECTOR;
    const to = Math.min(FLASH_BYTES, Math.ceil((start + count) / SECTOR) * SECTOR);
    if (from < to) {
      flash.fill(0xff, from, to);
      chip.flash.fill(0xff, from, to);
      persist(from, to - from);
      erasedSectors += (to - from) / SECTOR;
      clock.tick(((to - from) / SECTOR) * ERASE_NS_PER_SECTOR);
    }
  } else if (code === BKPT_PROGRAM) {
    const start = r[0] >>> 0, data = r[1] >>> 0, count = r[2] >>> 0;
    const end = Math.min(FLASH_BYTES, start + count);
    for (let a = start, s = data; a < end; a++, s++) {
      const v = flash[a] & chip.readUint8(s);
      flash[a] = v;
      chip.flash[a] = v;
    }
    if (end > start) {
      persist(start, end - start);
      programmedBytes += end - start;
      clock.tick(Math.ceil(count / 256) * PROGRAM_NS_PER_PAGE);
    }
  } else {
    log(`breakpoint ${code} at 0x${(core.PC - 2).toString(16)}: reset`);
    rebootWanted = true;
    return;
  }
  core.PC = core.LR & ~1; // return from the ROM function
}

// VREG_AND_CHIP_RESET: rp2040js leaves it unimplemented (reads 0xffffffff),
// and the boot ROM, seeing PSM_RESTART_FLAG set, waits for a debugger for
// ever. CHIP_RESET reads HAD_POR after a power-on, nothing after a watchdog
// reset (whose cause the watchdog's REASON register tells).
const CHIP_RESET = 0x8;
const HAD_POR = 1 << 8;
class ChipReset extends BasePeripheral {
  constructor(rp, chipReset) {
    super(rp, 'VREG_AND_CHIP_RESET');
    this.regs = { 0x0: 0xb1, 0x4: 0x8, [CHIP_RESET]: chipReset }; // VREG 1.1 V enabled, BOD on
  }
  readUint32(offset) { return this.regs[offset] ?? 0; }
  writeUint32(offset, value) { if (offset !== CHIP_RESET) this.regs[offset] = value; }
}

// PL011: the TX interrupt is raised when the transmit FIFO has drained
// (immediately here, bytes leave at once) and cleared by a write to ICR or
// by writing a byte; stock rp2040js re-asserts it on every check.
function fixUartTx(rp) {
  const TX = 1 << 5;
  for (const uart of rp.uart) {
    uart.checkInterrupts = function () {
      rp.setInterrupt(this.irq, !!(this.interruptStatus & this.interruptMask));
    };
    const write = uart.writeUint32.bind(uart);
    uart.writeUint32 = function (offset, value) {
      if (offset === 0x0) { // UARTDR: the byte goes out, the FIFO is empty again
        this.interruptStatus &= ~TX;
        write(offset, value);
        this.interruptStatus |= TX;
        this.checkInterrupts();
        return;
      }
      write(offset, value);
    };
    uart.interruptStatus |= TX; // an empty FIFO
  }
}

// ---- the run loop -------------------------------------------------------
let timer = null;
let stopping = false;

function wallNanos() {
  return (performance.now() - bootWall) * 1e6;
}

function schedule(delayMs) {
  if (timer !== null || stopping) return;
  if (delayMs <= 0) timer = setImmediate(() => { timer = null; run(); });
  else timer = setTimeout(() => { timer = null; run(); }, delayMs);
}

function wake() {
  // new input: run now instead of waiting for the next alarm
  if (timer !== null) {
    clearTimeout(timer);
    clearImmediate(timer);
    timer = null;
  }
  schedule(0);
}

function run() {
  const sliceEnd = performance.now() + 25;
  const core = chip.core;
  for (;;) {
    if (rebootWanted) {
      rebootWanted = false;
      boot();
      return schedule(0);
    }
    for (let i = 0; i < 20000; i++) {
      if (core.waiting) {
        if (core.interruptsUpdated && core.checkForInterrupts()) {
          core.waiting = false;
          continue;
        }
        const next = clock.nanosToNextAlarm;
        if (!clock.nextAlarm) {
          // nothing but input can wake it; its timer still counts the wall's time
          if (!opts.unpaced && wallNanos() > clock.nanos) clock.tick(wallNanos() - clock.nanos);
          return schedule(opts.unpaced ? 1 : 5);
        }
        if (opts.unpaced) {
          clock.tick(next);
          continue;
        }
        const ahead = clock.nanos + next - wallNanos();
        if (ahead > 0) {
          // idle until the alarm on the wall clock (input wakes us earlier)
          const late = wallNanos() - clock.nanos;
          if (late > 0) clock.tick(late);
          return schedule(Math.min(ahead / 1e6, 50));
        }
        clock.tick(next);
        continue;
      }
      const cycles = core.executeInstruction();
      instructions++;
      clock.tick(cycles * CYCLE_NS);
      if (core.waiting && chip.readUint16(core.PC - 2) === OP_WFI) {
        wfis++;
        sleepMarks.push(instructions);
        if (sleepMarks.length > SLEEP_MARKS) sleepMarks.shift();
      }
      if (rebootWanted) break;
    }
    if (!opts.unpaced) {
      const ahead = clock.nanos - wallNanos();
      if (ahead > 5e6) return schedule(ahead / 1e6);
      // Slower than the chip (busy): the emulated clock falls behind the wall
      // and stays behind, as a slow board's clock would, instead of jumping
      // forward at the next idle moment (a jump would spend a watchdog's or a
      // timeout's time at once while the host's next byte is still on its way).
      if (-ahead > MAX_LAG_NS) bootWall += (-ahead - MAX_LAG_NS) / 1e6;
    }
    if (performance.now() >= sliceEnd) return schedule(0);
  }
}

function writeStats() {
  if (!opts.stats) return;
  const stats = {
    instructions, cycles: chip.core.cycles, boots, watchdog_reason: lastReason, emulated_s: clock.nanos / 1e9,
    erased_sectors: erasedSectors, programmed_bytes: programmedBytes,
    boot_instructions: bootInstructions, wfis, sleep_marks: sleepMarks,
    wall_s: (performance.now() - bootWall) / 1e3,
  };
  fs.writeFileSync(opts.stats + '.tmp', JSON.stringify(stats) + '\n');
  fs.renameSync(opts.stats + '.tmp', opts.stats);
}

function readPace() {
  if (!opts.stats) return;
  let want;
  try { want = fs.readFileSync(opts.stats + '.pace', 'utf8').trim(); } catch (e) { return; }
  if (want === 'unpaced') opts.unpaced = true;
  else if (want === 'paced' && opts.unpaced) {
    opts.unpaced = false;
    bootWall = performance.now() - clock.nanos / 1e6;   // the wall starts where the emulated clock is
  }
}

function shutdown(code) {
  if (stopping) return;
  stopping = true;
  try { writeStats(); } catch (e) { /* best effort */ }
  try { fs.fsyncSync(flashFd); fs.closeSync(flashFd); } catch (e) { /* already closed */ }
  process.exit(code);
}

process.stdin.on('data', (data) => {
  toDevice.push(data);
  if (heldRead && cdc) {
    const { endpoint, size } = heldRead;
    heldRead = null;
    chip.usbCtrl.endpointReadDone(endpoint, takeBytes(size));
  }
  wake();
});
process.stdin.on('end', () => shutdown(0));
process.stdout.on('error', () => shutdown(0));
process.on('SIGTERM', () => shutdown(0));
process.on('SIGINT', () => shutdown(0));
process.on('SIGHUP', () => shutdown(0));
process.on('SIGUSR1', () => { rebootWanted = true; wake(); });
process.on('SIGUSR2', () => { readPace(); writeStats(); wake(); });

boot();
schedule(0);
if (process.env.SPORADIC_RP2EMU_READY_FD) {
  // the flash file is ready and the chip powered: whoever started us may say so
  const fd = Number(process.env.SPORADIC_RP2EMU_READY_FD);
  fs.writeSync(fd, 'ready\n');
  fs.closeSync(fd);
}
