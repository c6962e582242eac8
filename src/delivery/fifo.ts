// First-in first-out without Array.shift's copying: taken slots are cleared, and the array is cut
// once most of it is taken.

export class Fifo<T> {
  private items: (T | undefined)[] = []
  private head = 0

  get size (): number {
    return this.items.length - this.head
  }

  /** The first item, left in place. */
  peek (): T | undefined {
    return this.items[this.head]
  }

  /** The last item pushed and not taken yet. */
  last (): T | undefined {
    return this.head === this.items.length ? undefined : this.items[this.items.length - 1]
  }

  push (item: T): void {
    this.items.push(item)
  }

  shift (): T | undefined {
    if (this.head === this.items.length) return undefined
    const item = this.items[this.head]
    this.items[this.head++] = undefined
    if (this.head === this.items.length) {
      this.items = []
      this.head = 0
    } else if (this.head >= 4096 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return item
  }
}
