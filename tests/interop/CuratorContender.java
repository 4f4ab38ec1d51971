// A Curator InterProcessMutex contender for the interoperability test (the
// counterpart of examples/lock_order with a LOG argument): takes
// the lock ROUNDS times, appending "enter NAME" and "exit NAME" to LOG while
// holding it (one write each, O_APPEND), so that overlapping holders show.
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;

public class CuratorContender {
  public static void main(String[] args) throws Exception {
    String hosts = args[0], path = args[1], name = args[2], log = args[4];
    int rounds = Integer.parseInt(args[3]);
    try (CuratorFramework client =
             CuratorFrameworkFactory.newClient(hosts, 10000, 5000, new RetryNTimes(3, 100))) {
      client.start();
      InterProcessMutex mutex = new InterProcessMutex(client, path);
      for (int i = 0; i < rounds; ++i) {
        mutex.acquire();
        try {
          append(log, "enter " + name + "\n");
          Thread.sleep(2);
          append(log, "exit " + name + "\n");
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
