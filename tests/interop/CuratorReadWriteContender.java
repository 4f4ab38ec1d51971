// A Curator InterProcessReadWriteLock contender for the interoperability
// test: takes the read lock (MODE "read") or the write lock ("write") ROUNDS
// times, appending "enter MODE NAME" and "exit MODE NAME" to LOG while
// holding it (one write each, O_APPEND), so that the log shows who held what
// when.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.RetryNTimes;

public class CuratorReadWriteContender {
  public static void main(String[] args) throws Exception {
    String hosts = args[0], path = args[1], name = args[2], mode = args[4], log = args[5];
    int rounds = Integer.parseInt(args[3]);
    try (CuratorFramework client =
             CuratorFrameworkFactory.newClient(hosts, 10000, 5000, new RetryNTimes(3, 100))) {
      client.start();
      InterProcessReadWriteLock lock = new InterProcessReadWriteLock(client, path);
      InterProcessMutex mutex = mode.equals("read") ? lock.readLock() : lock.writeLock();
      for (int i = 0; i < rounds; ++i) {
        mutex.acquire();
        try {
          append(log, "enter " + mode + " " + name + "\n");
          Thread.sleep(5);
          append(log, "exit " + mode + " " + name + "\n");
        } finally {
          mutex.release();
        }
      }
    }
  }

  private static void append(String log, String line) throws Exception {
    Files.write(Paths.get(log), line.getBytes(StandardCharsets.UTF_8),
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
  }
}
