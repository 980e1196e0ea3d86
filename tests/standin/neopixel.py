# A no-op neopixel module for the esp32s3 board module on the unix port.
class NeoPixel:
    def __init__(self, pin, n):
        pass
    def __setitem__(self, i, v):
        pass
    def write(self):
        pass
